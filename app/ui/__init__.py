"""The Dash UI, mounted under ``/ui`` in the service's process and port.

``mount.mount_live(app, …)`` serves the running service's data;
``mount.standalone(source, config)`` serves a fixed source (a recording). Pages live in
``pages/`` (one module each), component ids in ``ids``, pure figure builders in
``figures``; ``data`` turns any ``source.WindowSource`` into diagnosed chart points.
"""
