"""The full-screen browser behind ``kbase browse`` (Textual).

Layers: ``app`` (the App, ``run``), ``screens`` (the main screen, the help screen), ``widgets``
(search bar, results, preview, links, status line), ``backend`` (library access from worker
threads; no Textual). Styles live in ``kbase.tcss``. Nothing here runs SQL: every read goes
through ``kbase.api.KB``, as the CLI's do.
"""
