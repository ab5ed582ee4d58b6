"""The pytest wiring: hook implementations, fixtures and options (plugin.py, the *_plugin.py
suite plugins), the session object (session.py) and gemmcheck's own hooks (hookspecs.py).
How a run is divided over hosts, workers, GPUs and cores is gemmcheck.schedule, which these
plugins call."""
