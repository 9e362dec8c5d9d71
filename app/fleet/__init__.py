"""Fleets and SLOs: the replicas of one model together, their imbalance, SLO attainment,
error budgets and burn rates.

Pure apart from reading deltas through a ``DeltaSource`` (``deltas``; read by
``count_cache``, ``tracker`` and ``view``)::

    from app.fleet.aggregate import fleet_window          # replica windows → fleet window
    from app.fleet.imbalance import find_imbalance        # the replica that departs
    from app.fleet.slo import good_below, window_counts   # attainment from buckets
    from app.fleet.budget import budget_text              # a budget in words, early or not
    from app.fleet.tracker import SloTracker              # burn rates and budgets
    from app.fleet.count_cache import CountCache          # an SLO's counts over any range
    from app.fleet.view import fleet_view                 # one fleet window, diagnosed
"""
