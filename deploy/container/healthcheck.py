"""The image's HEALTHCHECK: healthy when Berth's ``/healthcheck`` answers
2xx (its database check included), without curl in the image.

BERTH_HEALTHCHECK_URL overrides the address (another port, or https: the
certificate is not verified, the server being this container itself).
"""

import os
import ssl
import sys
import urllib.request

URL = os.environ.get("BERTH_HEALTHCHECK_URL",
                     "http://127.0.0.1:8778/healthcheck")

try:
    with urllib.request.urlopen(URL, timeout=5,
                                context=ssl._create_unverified_context()) as answer:
        print(answer.status, answer.read(200).decode(errors="replace"))
except Exception as exc:  # noqa: BLE001 - any failure is unhealthy
    print("unhealthy: %s: %s" % (URL, exc))
    sys.exit(1)
