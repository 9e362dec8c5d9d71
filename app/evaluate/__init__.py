"""The evaluation layer: the round, the same code for the service and for replay.

``settings`` (settings → the ``DiagnosisConfig`` the pure core is handed: the one SLO
resolution), ``instances`` (windows, diagnoses, scrape health and SLO burn rates → the
instances alert rules are evaluated on), ``round`` (one round: windows of each stream →
diagnose → diagnosis rows → SLO → instances; ``Evaluator`` runs it over the store),
``replay`` (a recording judged window by window: the diagnosis timeline, the alerts that
would have fired), ``baseline`` (a stream's healthy baseline for what changed: which
windows, from the timeline in replay, review and the UI, from the stored rows in the
service, from Prometheus or a store for ``diagnose URL``).
"""
