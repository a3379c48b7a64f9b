"""Generate a Python client from a live mnemos server's /openapi.json with
openapi-python-client (PyPI) and use it, as an integrator would.

Usage: openapi_client.py BASE_URL API_KEY WORK_DIR

Fails when the generator warns about or drops any operation of the document (every
operation must become a module), or when the generated client cannot store, list, read,
recall and delete a memory. Prints a JSON summary on success.
"""

import importlib
import json
import os
import subprocess
import sys
import urllib.request


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def main(base_url, key, work_dir):
    with urllib.request.urlopen(f"{base_url}/openapi.json", timeout=30) as response:
        document = json.load(response)
    spec_path = os.path.join(work_dir, "openapi.json")
    with open(spec_path, "w", encoding="utf-8") as out:
        json.dump(document, out)
    check(document["openapi"].startswith("3.1"), f"openapi {document['openapi']}")
    operations = {
        operation["operationId"]: (method, path)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in ("get", "put", "post", "delete", "patch")
    }
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method not in ("get", "put", "post", "delete", "patch"):
                continue
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path":
                    check("{" + parameter["name"] + "}" in path,
                          f"{method} {path}: path parameter {parameter['name']} is not in the path")
            check(operation.get("tags"), f"{method} {path}: no tag")
    check(document.get("servers"), "no servers")
    check("api_key" in document["components"]["securitySchemes"], "no api_key security scheme")

    package = "mnemos_generated"
    generated = subprocess.run(
        [sys.executable, "-m", "openapi_python_client", "generate", "--path", spec_path,
         "--meta", "none", "--output-path", os.path.join(work_dir, package), "--overwrite"],
        capture_output=True, text=True, timeout=600,
    )
    output = generated.stdout + generated.stderr
    check(generated.returncode == 0, f"generator failed:\n{output}")
    check("warning" not in output.lower(), f"generator warned (an operation may be dropped):\n{output}")
    modules = set()
    for root, _dirs, files in os.walk(os.path.join(work_dir, package, "api")):
        modules.update(f[:-3] for f in files if f.endswith(".py") and f != "__init__.py")
    dropped = sorted(set(operations) - modules)
    check(not dropped, f"operations the generated client dropped: {dropped}")

    sys.path.insert(0, work_dir)
    client_module = importlib.import_module(f"{package}.client")
    remember = importlib.import_module(f"{package}.api.tools.remember")
    recall = importlib.import_module(f"{package}.api.tools.recall")
    list_memories = importlib.import_module(f"{package}.api.memories.list_memories")
    get_memory = importlib.import_module(f"{package}.api.memories.get_memory")
    delete_memory = importlib.import_module(f"{package}.api.memories.delete_memory")
    models = importlib.import_module(f"{package}.models")

    client = client_module.AuthenticatedClient(base_url=base_url, token=key)
    stored = remember.sync(client=client, body=models.RememberBody(
        agent_id="gen-alice", content="The staging database listens on port 5433"))
    check(isinstance(stored, models.RememberResponse), f"remember: {stored}")
    memory_id = stored.memory.id
    page = list_memories.sync(client=client, agent_id="gen-alice", limit=10)
    check(isinstance(page, models.ListResponse) and [m.id for m in page.memories] == [memory_id],
          f"list_memories: {page}")
    one = get_memory.sync(client=client, id=memory_id, agent_id="gen-alice")
    check(isinstance(one, models.MemoryView) and one.content.endswith("5433"), f"get_memory: {one}")
    found = recall.sync(client=client, body=models.RecallBody(
        agent_id="gen-alice", query="staging database port", min_score=0.05))
    check(isinstance(found, models.RecallResponse) and found.results[0].memory.id == memory_id
          and 0 < found.results[0].score <= 1, f"recall: {found}")
    refused = get_memory.sync_detailed(client=client, id=memory_id)
    check(refused.status_code == 400 and isinstance(refused.parsed, models.ErrorBody)
          and refused.parsed.error.field == "agent_id", f"get without owner: {refused}")
    deleted = delete_memory.sync(client=client, id=memory_id, agent_id="gen-alice")
    check(isinstance(deleted, models.DeleteResponse) and deleted.deleted == memory_id, f"delete: {deleted}")
    gone = get_memory.sync_detailed(client=client, id=memory_id, agent_id="gen-alice")
    check(gone.status_code == 404, f"get after delete: {gone.status_code}")

    print(json.dumps({"ok": True, "operations": len(operations), "modules": len(modules)}))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(*sys.argv[1:])
