"""Numbers the HTTP API stops at, which the server enforces and the client
library keeps to, and the error code of a conflict both know (pure, so
that ``berth.client`` may import it)."""

#: The largest amount, total or unit the API takes: the largest value of
#: a signed 32-bit column, so a larger number is a 400, not a database
#: error.
MAX_INT = 2147483647

#: The most trees one ``tree`` filter of the change feed names: a request
#: line naming them all stays far below the 8 KiB limit.
MAX_TREES = 100

#: The error code of a generation conflict (refresh, recompute, retry):
#: ``berth.api.errors`` answers it, ``berth.client`` recognizes it.
CONCURRENT_UPDATE = "placement.concurrent_update"
