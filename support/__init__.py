"""What the tests, the benchmarks and the CI scripts share: worlds to
build, servers and clusters to start, loads to send.

Nothing here is a test or a fixture (fixtures stay in the conftest.py
files and fixture modules under tests/: tests/README.md), and nothing
here imports from ``tests``, so bench/ and .ci/ use it without the test
suite. Importable from the repository
root: pytest puts it on ``sys.path`` (pyproject's ``pythonpath``), bench
scripts insert it, ``python -m support.galera`` runs from it.
"""
