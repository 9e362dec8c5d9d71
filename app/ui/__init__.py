"""The Dash UI, mounted under ``/ui`` in the service's process and port.

``mount.mount_live(app, …)`` serves the running service's data;
``mount.standalone(source, config)`` serves a fixed source (a recording). Pages live in
``pages/`` (one module each), component ids in ``ids``, pure figure builders in
``figures``. The pages render only: what they show — windows, diagnoses, baselines,
fleets, SLO status, alerts — is read by ``app.read`` (``target``, ``fleetpage``,
``source``, ``pages``), through the service's evaluation path.
"""
