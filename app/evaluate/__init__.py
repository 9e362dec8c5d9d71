"""The evaluation layer: settings resolved into the values the pure core is given
(``settings``), and the round that runs windows → diagnose → alerts over them."""
