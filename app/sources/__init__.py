"""Everything that yields scrapes, behind one ``Source`` protocol (``base``).

``process`` (one page → the target's next state and the scrape's outcome: the pure
transition every page goes through, and ``PageFeed``, one target's pages in order);
``live`` (the service's scrape of its targets), ``follow`` (the service reading a
Prometheus API instead), ``recording`` (a folder of pages), ``watch`` (a URL scraped for
a while); ``prometheus`` (series → snapshots → deltas over a range) and ``promapi`` (the
Prometheus HTTP API client).
"""
