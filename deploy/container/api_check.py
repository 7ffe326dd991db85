"""The API round of deploy/container/test.sh, from the host against the
container: a provider, its inventory, a claim, a candidates query, and
the usages the claim left. Standard library only.

    python3 api_check.py BASE_URL
"""

import json
import sys
import urllib.error
import urllib.request
import uuid

BASE = sys.argv[1].rstrip("/")
HEADERS = {"x-auth-token": "admin", "content-type": "application/json",
           "openstack-api-version": "placement 1.39"}


def call(method, path, body=None, expect=200):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(BASE + path, data=data, method=method,
                                     headers=HEADERS)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            status, text = answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read()
    if status != expect:
        sys.exit("api_check: %s %s: %d, expected %d: %s"
                 % (method, path, status, expect, text[:500].decode()))
    return json.loads(text) if text else None


rp = str(uuid.uuid4())
consumer, project, user = (str(uuid.uuid4()) for _ in range(3))
call("POST", "/resource_providers", {"name": "image-test", "uuid": rp})
call("PUT", "/resource_providers/%s/inventories" % rp, {
    "resource_provider_generation": 0,
    "inventories": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096}}})
call("PUT", "/allocations/%s" % consumer, {
    "allocations": {rp: {"resources": {"VCPU": 2, "MEMORY_MB": 1024}}},
    "project_id": project, "user_id": user, "consumer_generation": None,
    "consumer_type": "INSTANCE"},
    expect=204)
found = call("GET", "/allocation_candidates?resources=VCPU:6,MEMORY_MB:3072")
if [list(r["allocations"]) for r in found["allocation_requests"]] != [[rp]]:
    sys.exit("api_check: candidates: %s" % json.dumps(found)[:500])
found = call("GET", "/allocation_candidates?resources=VCPU:7")
if found["allocation_requests"]:
    sys.exit("api_check: 7 VCPU fit beside the claim: %s" % found)
usages = call("GET", "/resource_providers/%s/usages" % rp)["usages"]
if usages != {"VCPU": 2, "MEMORY_MB": 1024}:
    sys.exit("api_check: usages %s" % usages)
print("api_check: provider, inventory, claim, candidates and usages: ok")
