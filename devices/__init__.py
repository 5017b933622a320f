"""Bundled device profiles: YAML data, one file per device family (installed as
``dispatchprof.device_profiles``; the schema lives in ``dispatchprof/devices.py``)."""
