"""Every handler in the routes table says in its docstring which statuses
it answers, as upstream's handlers do: the routes table shows the where,
the docstring the what. Each status the OpenAPI document gives the
operation (its successes and its own errors) is among them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from berth.api.openapi_document.operations import OPERATIONS
from berth.api.routes import ROUTES

STATUS = re.compile(r"\b[1-5][0-9][0-9]\b")


def _handlers() -> Iterator[Any]:
    for path, methods in ROUTES.items():
        for method, spec in methods.items():
            handler = spec[0] if isinstance(spec, tuple) else spec
            yield pytest.param(path, method, handler, id="%s %s" % (method, path))


@pytest.mark.parametrize("path,method,handler", list(_handlers()))
def test_the_docstring_names_the_statuses(path: str, method: str, handler: Any) -> None:
    name = "%s.%s" % (handler.__module__, handler.__qualname__)
    said = {int(s) for s in STATUS.findall(handler.__doc__ or "")}
    assert said, "%s names no status in its docstring" % name
    op = OPERATIONS[(path, method)]
    missing = (set(op.ok) | set(op.errors)) - said
    assert not missing, "%s does not say it answers %s" % (name, sorted(missing))


def test_every_public_function_of_a_handler_module_is_routed() -> None:
    """So that the rule above covers every handler: what a handler
    module shares with nobody is private (``_name``); what the app's one
    error handler calls is named in the module's ``APP_HOOKS``."""
    import importlib
    import inspect
    import pkgutil

    import berth.api.handlers as package

    routed = {
        spec[0] if isinstance(spec, tuple) else spec
        for methods in ROUTES.values()
        for spec in methods.values()
    }
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module("%s.%s" % (package.__name__, info.name))
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            hooks = getattr(module, "APP_HOOKS", ())
            if fn.__module__ == module.__name__ and not name.startswith("_") and name not in hooks:
                assert fn in routed, "%s.%s is public but not routed" % (module.__name__, name)
