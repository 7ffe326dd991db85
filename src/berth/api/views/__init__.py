"""Response bodies that more than one handler writes, one module per
resource: below the handlers, so each can import them (handlers never
import handlers)."""
