"""teton's version, at the bottom of the layers so that any package may stamp it (a sweep's
cache key, a report's footer) without importing the facade above them."""

__version__ = "0.1.0"
