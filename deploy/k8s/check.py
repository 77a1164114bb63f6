"""What the statepipe manifests promise, checked on one kustomize rendering.

    python3 deploy/k8s/check.py RENDERED.yaml

Schema validity is kubernetes-validate's job (validate.sh runs both); this
checks what a schema cannot: every container is Guaranteed QoS with whole
CPUs, the worker count agrees wherever it appears, the workers reach the
master's Service, scale as a Deployment, leave gracefully within their
grace period and report readiness, the pipeline's members likewise (and
as many as its coordinator waits for), the secret comes from a Secret,
and serve keeps its journal on a claimed volume. Prints one line and
exits 0, or names every broken promise and exits 1.
"""

import sys

import yaml

DRAIN_S = 30  # how long `statepipe serve` may take to drain on SIGTERM
# The least grace a worker gets to leave on SIGTERM: its states move when
# the step in progress ends, so the grace must cover a step.
LEAVE_S = 60
# The least grace a pipeline member gets to leave on SIGTERM: it is let go
# once a checkpoint taken after its request is committed and its parts are
# restored on the others, one checkpoint interval and a restore.
MEMBER_LEAVE_S = 30


def containers(doc):
    spec = doc.get("spec", {}).get("template", {}).get("spec", {})
    return spec.get("containers", []) + spec.get("initContainers", [])


def check(docs):
    errors = []
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs}

    for (kind, name), d in by.items():
        for c in containers(d):
            where = f"{kind}/{name} container {c['name']}"
            res = c.get("resources", {})
            req, lim = res.get("requests", {}), res.get("limits", {})
            for r in ("cpu", "memory"):
                if r not in lim or req.get(r) != lim.get(r):
                    errors.append(f"{where}: {r} requests {req.get(r)} != limits {lim.get(r)}")
            if not str(lim.get("cpu", "")).isdigit() or int(lim["cpu"]) < 1:
                errors.append(f"{where}: cpu {lim.get('cpu')!r} is not a whole number of CPUs")
        sc = d.get("spec", {}).get("template", {}).get("spec", {}).get("securityContext", {})
        if containers(d) and not sc.get("runAsNonRoot"):
            errors.append(f"{kind}/{name}: runAsNonRoot is not set")

    master = by.get(("Job", "statepipe-master"))
    workers = by.get(("Deployment", "statepipe-worker"))
    service = by.get(("Service", "statepipe-master"))
    if not (master and workers and service):
        return errors + ["the master Job, its Service or the worker Deployment is missing"], ""
    args = containers(master)[0]["args"]
    n = int(args[args.index("--workers") + 1])
    if workers["spec"].get("replicas") != n:
        errors.append(f"master --workers {n}, worker Deployment replicas {workers['spec'].get('replicas')}")
    errors += check_elastic(workers, "worker", LEAVE_S, "a step")
    wc = containers(workers)[0]
    connect = wc["args"][wc["args"].index("--connect") + 1]
    host, port = connect.rsplit(":", 1)
    if host != "statepipe-master" or int(port) not in [p["port"] for p in service["spec"]["ports"]]:
        errors.append(f"workers connect to {connect}, not to the master's Service")
    errors += check_served_file(workers, "workers")
    for job in (master, workers):
        env = {e["name"]: e for e in containers(job)[0].get("env", [])}
        ref = env.get("STATEPIPE_SECRET", {}).get("valueFrom", {}).get("secretKeyRef")
        if not ref:
            errors.append(f"{job['metadata']['name']}: STATEPIPE_SECRET is not from a secretKeyRef")

    serve = by.get(("StatefulSet", "statepipe-serve"))
    if not serve:
        return errors + ["the serve StatefulSet is missing"], ""
    sc = containers(serve)[0]
    claims = [t["metadata"]["name"] for t in serve["spec"].get("volumeClaimTemplates", [])]
    mounts = {m["mountPath"]: m["name"] for m in sc.get("volumeMounts", [])}
    if mounts.get("/data") not in claims:
        errors.append("serve's /data is not a volumeClaimTemplate")
    if "--data" not in sc["args"] or sc["args"][sc["args"].index("--data") + 1] != "/data":
        errors.append("serve is not given --data /data")
    for probe in ("readinessProbe", "livenessProbe"):
        if sc.get(probe, {}).get("httpGet", {}).get("path") != "/health":
            errors.append(f"serve's {probe} is not on /health")
    grace = serve["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
    pause = sc.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    if grace <= pause + DRAIN_S:
        errors.append(f"grace {grace} s does not cover preStop {pause} s + drain {DRAIN_S} s")
    pdb = [d for (k, _), d in by.items() if k == "PodDisruptionBudget"]
    if not any(p["spec"]["selector"] == serve["spec"]["selector"] for p in pdb):
        errors.append("no PodDisruptionBudget selects serve")

    errors += check_pipeline(by)

    cpus = containers(workers)[0]["resources"]["limits"]["cpu"]
    summary = f"{n} workers x {cpus} CPU, serve on {sc['resources']['limits']['cpu']} CPU"
    co = by.get(("Job", "statepipe-pipeline-coordinator"))
    if co:
        a = containers(co)[0]["args"]
        opt = lambda k: a[a.index(k) + 1] if k in a else "?"
        summary += f", pipeline {opt('--members')} members ({opt('--parts')} parts)"
    return errors, summary


def check_elastic(d, who, least, covers):
    """Workers or pipeline members scale in and out mid-run: the
    Deployment selects its own pods, a scaled-in pod gets the grace to
    leave (SIGTERM), and the readiness probe asks the process's own health
    endpoint."""
    errors = []
    spec = d["spec"]["template"]["spec"]
    labels = d["spec"]["template"]["metadata"].get("labels", {})
    wanted = d["spec"].get("selector", {}).get("matchLabels", {})
    if not wanted or any(labels.get(k) != v for k, v in wanted.items()):
        errors.append(f"the {who} Deployment's selector does not match its pods' labels")
    grace = spec.get("terminationGracePeriodSeconds", 30)
    if grace < least:
        errors.append(f"the {who}s' grace {grace} s is under {least} s: a leave must cover {covers}")
    if spec.get("restartPolicy", "Always") != "Always":
        errors.append(f"the {who} Deployment's restartPolicy is not Always")
    c = containers(d)[0]
    args = c["args"]
    if "--health" not in args:
        return errors + [f"the {who}s have no --health endpoint for their readiness probe"]
    port = int(args[args.index("--health") + 1].rsplit(":", 1)[1])
    named = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    probe = c.get("readinessProbe", {}).get("httpGet", {})
    target = probe.get("port")
    target = named.get(target) if isinstance(target, str) else target
    if probe.get("path") != "/health" or target != port:
        errors.append(f"the {who}s' readinessProbe is not GET /health on their --health port {port}")
    return errors


def check_served_file(d, who):
    """A Deployment starts its pods again whatever their exit: the process
    needs its record of having served a run on a volume that outlives the
    container (the root filesystem is read-only), to exit 0 once that run
    is over."""
    c = containers(d)[0]
    if "--served-file" not in c["args"]:
        return [f"the {who} have no --served-file: restarted after the run, they fail"]
    record = c["args"][c["args"].index("--served-file") + 1]
    vols = {v["name"]: v for v in d["spec"]["template"]["spec"].get("volumes", [])}
    mounted = [
        m for m in c.get("volumeMounts", [])
        if record.startswith(m["mountPath"].rstrip("/") + "/")
        and "emptyDir" in vols.get(m["name"], {})
    ]
    if not mounted:
        return [f"the {who}' --served-file {record} is not on an emptyDir volume"]
    return []


def check_pipeline(by):
    """The distributed pipeline: one run, so a coordinator Job that ends
    when it does; members a Deployment that scales mid-run like the
    workers, as many to start with as the coordinator waits for, joining
    the coordinator's stable name; more parts than members (a member that
    joins gets parts); every process proves the Secret and mounts the one
    shared checkpoint volume."""
    errors = []
    co = by.get(("Job", "statepipe-pipeline-coordinator"))
    members = by.get(("Deployment", "statepipe-pipeline-member"))
    service = by.get(("Service", "statepipe-pipeline"))
    if not (co and members and service):
        return ["the pipeline's coordinator Job, member Deployment or headless Service is missing"]
    if service["spec"].get("clusterIP") != "None":
        errors.append("the pipeline's Service is not headless (stable pod names)")
    args = containers(co)[0]["args"]
    n = int(args[args.index("--members") + 1])
    if members["spec"].get("replicas") != n:
        errors.append(
            f"coordinator --members {n}, member Deployment replicas {members['spec'].get('replicas')}"
        )
    if "--min-members" not in args:
        errors.append("the coordinator has no --min-members: with no member left the run fails")
    parts = int(args[args.index("--parts") + 1]) if "--parts" in args else n
    if parts <= n:
        errors.append(f"coordinator --parts {parts} is not above --members {n}: a member that joins gets no part")
    errors += check_elastic(members, "member", MEMBER_LEAVE_S, "a checkpoint and a restore")
    errors += check_served_file(members, "members")
    cospec = co["spec"]["template"]["spec"]
    if cospec.get("subdomain") != service["metadata"]["name"] or not cospec.get("hostname"):
        errors.append("the coordinator's pod has no hostname under the headless Service")
    port = args[args.index("--coordinator") + 1].rsplit(":", 1)[1]
    margs = containers(members)[0]["args"]
    want = f"{cospec.get('hostname')}.{service['metadata']['name']}:{port}"
    if margs[margs.index("--connect") + 1] != want:
        errors.append(f"members connect to {margs[margs.index('--connect') + 1]}, not {want}")
    if "--resume" not in args or args[args.index("--resume") + 1] != "/checkpoints":
        errors.append("a restarted coordinator does not --resume /checkpoints")
    if co["spec"]["template"]["spec"].get("restartPolicy") not in ("OnFailure", "Never"):
        errors.append("the coordinator's restartPolicy runs a finished run again")
    for s in (co, members):
        c = containers(s)[0]
        name = s["metadata"]["name"]
        spec = s["spec"]["template"]["spec"]
        env = {e["name"]: e for e in c.get("env", [])}
        if not env.get("STATEPIPE_SECRET", {}).get("valueFrom", {}).get("secretKeyRef"):
            errors.append(f"{name}: STATEPIPE_SECRET is not from a secretKeyRef")
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        mount = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
        claim = vols.get(mount.get("/checkpoints"), {}).get("persistentVolumeClaim", {})
        if claim.get("claimName") != "statepipe-pipeline-checkpoints":
            errors.append(f"{name}: /checkpoints is not the shared checkpoint volume")
    pvc = by.get(("PersistentVolumeClaim", "statepipe-pipeline-checkpoints"), {})
    if "ReadWriteMany" not in pvc.get("spec", {}).get("accessModes", []):
        errors.append("the checkpoint volume is not ReadWriteMany (members restore each other's parts)")
    if "/checkpoints" not in args or args[args.index("--checkpoint-dir") + 1] != "/checkpoints":
        errors.append("the coordinator does not checkpoint to /checkpoints")
    return errors


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    errors, summary = check(docs)
    for e in errors:
        print(f"{sys.argv[1]}: {e}", file=sys.stderr)
    if errors:
        sys.exit(1)
    print(f"{sys.argv[1]}: ok: {summary}")


if __name__ == "__main__":
    main()
