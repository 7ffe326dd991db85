"""Numbers the HTTP API stops at, which the server enforces and the client
library keeps to (pure, so that ``berth.client`` may import it)."""

#: The largest amount, total or unit the API takes: the largest value of
#: a signed 32-bit column, so a larger number is a 400, not a database
#: error.
MAX_INT = 2147483647

#: The most trees one ``tree`` filter of the change feed names: a request
#: line naming them all stays far below the 8 KiB limit.
MAX_TREES = 100
