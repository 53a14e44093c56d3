"""The I/O shell: every command as one function that reads, hashes, calls the pure core, writes and records.

The core packages (``forecast``, ``placement``, ``sim``, ``calibrate``, ``loop``, ``report``)
take values and return values: they open no file, read no environment variable and import
nothing from here, from ``planner.cli``, ``planner.runs`` or ``planner.storage``
(``tests/test_core_purity.py`` holds them to it). This package is where their inputs are
read and hashed, their outputs written all or none (:mod:`planner.storage`), and the run
recorded (:mod:`planner.runs`). The CLI parses options, resolves the settings once
(:class:`planner.settings.Settings`), calls one workflow per command and renders the result.

Modules: ``common`` (loading a scenario with its profiles, hashing, recording the seed),
``files`` (the writers of every command's outputs), ``calibration_cache`` (the calibration
cache as a folder of JSON files), ``inputs`` (request-log timestamps and measured runs),
``report_lock`` and ``report_files`` (the reports folder), and the commands' workflows:
``place``, ``simulate`` (also ``experiment``), ``calibrate``, ``forecast``, ``plan`` (also
``report``) and ``data`` (``ingest`` and ``profiles fit``).
"""
