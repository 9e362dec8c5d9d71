"""Sources of the canonical signals other than scraping: a Prometheus-compatible API.

``prometheus`` reads the vLLM series and turns them into the records a scrape gives
(``Snapshot``, ``IntervalDelta``); ``promapi`` is the HTTP client; ``collector`` runs it
as the service's collection job.
"""
