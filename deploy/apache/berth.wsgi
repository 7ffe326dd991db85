# mod_wsgi's WSGIScriptAlias names a file: this one hands it Berth's
# entry point (docs/install.md, "Apache and mod_wsgi").
from berth.wsgi import application  # noqa: F401
