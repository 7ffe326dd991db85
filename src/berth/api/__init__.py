"""The HTTP layer: routing, microversions, errors, handlers and schemas."""
