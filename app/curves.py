"""The board's bounded curves (:mod:`engine.curves`, where loss.png is drawn from them too), under the name the
board's modules import them by."""

from engine.curves import LIMIT, MIN_LIMIT, Curve, Point, curve_of, iter_events

__all__ = ["LIMIT", "MIN_LIMIT", "Curve", "Point", "curve_of", "iter_events"]
