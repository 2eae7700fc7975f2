"""Users' own nccl-tests outputs (text and -J JSON), read from a file by `gpudoctor check --from`
(gpudoctor/paste/nccl_tests.py), judged; nvbandwidth's and `dcgmi diag`'s are judged beside it (checks/
nvbandwidth.py, checks/dcgm.py), the fix that reruns a run is built in gpudoctor/judging/rerun.py. Each figure is
set against the published healthy figure for the machine the output shows (its device list, or the GPUs and
topology elsewhere in the same file), saying what it should be and why. A run that cannot show the hardware's
speed (too small, a lone rank, a figure the network cannot carry) is said to be unjudgeable, never blamed on
the hardware. Pure judges of facts; nothing runs."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from gpudoctor.api import Metric, Remediation, Result, Row, Status, check, expect, gpu_model, nics, references, routes
from gpudoctor.judging.bench import Judged, combine, judged
from gpudoctor.judging.rerun import RERUN, rerun_in

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext

# nccl-tests' peak bus bandwidth needs large messages: the published healthy figures were read at 8-16 GiB, and
# NCCL's maintainers call 256 MiB "too small to reach peak" on 8x H100 (NVIDIA/nccl-tests issue 212).
MIN_BYTES = 2**30
COLLECTIVE_FIGURE = {
    "all_reduce": "allreduce_busbw",
    "all_gather": "allgather_busbw",
    "reduce_scatter": "reducescatter_busbw",
    "alltoall": "alltoall_busbw",
}
NO_MPI = Remediation(
    "Every process ran alone (nccl-tests built without MPI, launched by mpirun or srun: each prints 'Rank 0' "
    "and a one-rank all-reduce moves nothing), so the figures say nothing about the hardware.",
    [
        'make MPI=1 MPI_HOME="$(dirname "$(dirname "$(command -v mpicc)")")" -C nccl-tests',
        RERUN,
    ],
)
TOO_SMALL = Remediation(
    "Bus bandwidth grows with the message size; below 1 GiB it shows latency, not the links.",
    [RERUN],
)


@check(
    "bench.nccl-tests",
    "nccl-tests output against published healthy figures",
    needs=("benchmarks",),
)
def nccl_tests(ctx: CheckContext) -> Result:
    """Every nccl-tests run in the file: verified values first, then the largest message's bus bandwidth
    against the healthy figure for that GPU model, GPU count, node count and algorithm (NCCL_ALGO from the
    JSON's environment, the command line or NCCL's own log lines in the same file); between nodes, the causes
    the file shows (sockets instead of RDMA, uneven ranks, NICs shared); a run far below another of the same
    test."""
    runs = (ctx.facts.get("benchmarks") or {}).get("nccl_tests") or []
    if not runs:
        return Result(Status.SKIP, "no nccl-tests output in this file")
    gpus, env = ctx.nvml.get("gpus") or [], ctx.system.get("env") or {}
    shown = shown_in(ctx.facts)
    runs = [{**run, "env": {**env, **(run.get("env") or {})}} for run in runs]
    verdicts = [judge_run(run, gpus, shown) for run in runs]
    result = combine(compared(runs, verdicts), "nccl-tests run")
    warned = [row.summary for row in result.rows if row.status == Status.WARN]
    if result.status == Status.WARN and all(said == STOPPED_SAID for said in warned):
        result.aspect = "p2p-hang"  # every warning is a run that stopped after its devices: a hang is suspected
    return result


def shown_in(facts: dict[str, Any]) -> dict[str, Any]:
    """What a file shows of the machine besides its runs: the NICs NCCL's log names (`ib_devices`), the network
    and fabric it chose (`net`, `fabric`), ibstat's `ports`, `topo -m`'s `topology`."""
    nccl = facts.get("nccl") or {}
    return {
        "ib_devices": nccl.get("ib_devices") or [],
        "net": nccl.get("net"),
        "fabric": nics.fabric_of(str(nccl["net"]), nccl) if nccl.get("net") else None,
        "transports": nccl.get("transports") or [],
        "ports": (facts.get("system") or {}).get("infiniband") or [],
        "topology": (facts.get("nvml") or {}).get("topology") or {},
    }


SLOWER = 3  # times: one run of a test this far below the same test on the same GPUs took another path


def compared(runs: list[dict[str, Any]], verdicts: list[Judged]) -> list[Judged]:
    """Runs of one test (collective, hosts, ranks, settings) on the same GPUs compared at each one's largest
    size: one at a third or less of the best other run of that test at that size, not already failed, is a
    warning that it took another path (TCP instead of RDMA, another NIC, a link down)."""
    peaks = [(test_of(run), *largest(run)) for run in runs]  # (test, largest size, busbw there)
    best: dict[tuple[Any, ...], list[tuple[float, int]]] = {}  # (test, size) -> the two best (busbw, run)
    for number, (test, size, busbw) in enumerate(peaks):
        if size:
            best.setdefault((test, size), []).append((busbw, number))
    for ranked in best.values():
        ranked.sort(reverse=True)
        del ranked[2:]
    out = list(verdicts)
    for number, (run, (test, size, slow)) in enumerate(zip(runs, peaks, strict=True)):
        fast, other = next(((b, n) for b, n in best.get((test, size), []) if n != number), (0.0, -1))
        row = out[number][0]
        if size and fast >= SLOWER * slow and row.status in (Status.PASS, Status.SKIP):
            row.status = Status.WARN
            row.summary = (
                f"busbw {slow:.4g} GB/s at {references.size_text(size)} where the same test gave {fast:.4g} "
                f"(line {runs[other].get('line')}): it took another path (transport, NIC or link)"
            )
            again = Remediation(
                "The same test on the same GPUs ran several times faster in another run of this file: compare the "
                "network and transports NCCL chose in each.",
                ["NCCL_DEBUG=INFO {rerun} 2>&1 | grep -E 'Using network|NET/| via '"],
            )
            out[number] = (row, rerun_in(again, run))
    return out


def test_of(run: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two runs the same test: collective, hosts, ranks and settings (NCCL_DEBUG aside)."""
    settings = {k: str(v) for k, v in (run.get("env") or {}).items() if not k.startswith("NCCL_DEBUG")}
    return collective_of(run), tuple(run.get("hosts") or []), run.get("ranks"), tuple(sorted(settings.items()))


def largest(run: dict[str, Any]) -> tuple[int, float]:
    """The run's largest size and its bus bandwidth there (0, 0.0 without rows)."""
    rows = run.get("rows") or []
    if not rows:
        return 0, 0.0
    row = max(rows, key=lambda r: int(r.get("bytes") or 0))
    return int(row.get("bytes") or 0), peak_busbw(row)


def judge_run(run: dict[str, Any], gpus: list[dict[str, Any]], shown: dict[str, Any]) -> Judged:
    """One nccl-tests run, its row named by the run (collective and line); `shown`: shown_in(the file's facts)."""
    row, cure = _judge_run(run, gpus, shown)
    row.name = run_name(run)
    if len(run.get("hosts") or []) > 1:
        cure = with_network_causes(row, cure, run, shown)
    return row, rerun_in(cure, run)


# A cause the file shows of a run between nodes: (it makes the run abnormal, what it is, commands that confirm
# or cure it, RERUN standing for the run's own command).
NetworkCause = tuple[bool, str, list[str]]
SHOW_NETWORK = "2>&1 | grep -E 'NET/IB : Using|Using network|NET/Socket'"


def network_causes(run: dict[str, Any], shown: dict[str, Any]) -> list[NetworkCause]:
    """What the file shows that slows a run between nodes: NCCL on TCP sockets (InfiniBand turned off on the
    command line or in the environment, or no RDMA NIC found), ranks spread unevenly over the nodes, fewer NICs
    than GPUs per node (NCCL pairs each GPU with a NIC: nccl/src/graph/search.cc)."""
    causes: list[NetworkCause] = []
    disabled = str((run.get("env") or {}).get("NCCL_IB_DISABLE") or "0")
    if disabled.isascii() and disabled.isdigit() and int(disabled[:9]):  # as NCCL reads it (ncclParamIbDisable)
        causes.append(
            (
                True,
                f"over TCP sockets: NCCL_IB_DISABLE={disabled} turned InfiniBand and RoCE off",
                ["NCCL_IB_DISABLE=0 NCCL_DEBUG=INFO {rerun} " + SHOW_NETWORK],
            )
        )
    elif shown.get("net") == "Socket" or any(str(t).startswith("NET/Socket") for t in shown.get("transports") or []):
        causes.append(
            (
                True,
                "over TCP sockets (NCCL's log: NET/Socket): NCCL found no RDMA NIC it could use",
                ["ibv_devinfo", "ls /dev/infiniband", "NCCL_DEBUG=INFO {rerun} " + SHOW_NETWORK],
            )
        )
    per_node = Counter(str(d.get("host")) for d in run.get("devices") or [])
    if len(set(per_node.values())) > 1:
        counts = " and ".join(str(n) for n in sorted(set(per_node.values())))
        causes.append((False, f"ranks per node differ ({counts}): the fullest node's NICs carry the most", []))
    nics, most = len(shown.get("ib_devices") or []), max(per_node.values(), default=0)
    if 0 < nics < most:
        shared = f"{nics} NICs in NCCL's log for {most} GPUs a node: GPUs share NICs"
        causes.append((False, shared, ["nvidia-smi topo -m", "ibstat"]))
    return causes


def with_network_causes(
    row: Row, cure: Remediation | None, run: dict[str, Any], shown: dict[str, Any]
) -> Remediation | None:
    """The run's row and fix with the causes the file shows: one that makes it abnormal turns a pass or an
    unjudgeable figure into a warning that names it; each cause joins the fix with its commands."""
    causes = network_causes(run, shown)
    if not causes:
        return cure
    abnormal = next((said for bad, said, _ in causes if bad), None)
    if abnormal and row.status in (Status.PASS, Status.SKIP):
        row.status = Status.WARN
        row.summary = f"{row.summary.split('; ')[0]} {abnormal}"
    why = "Likeliest causes the output shows: " + "; ".join(said for _, said, _ in causes) + "."
    commands = [c for _, _, listed in causes for c in listed]
    if cure is None:
        return Remediation(why, commands)
    return Remediation(f"{why} {cure.why}", list(dict.fromkeys(commands + cure.commands)), cure.instead, cure.source)


def peak_busbw(row: dict[str, Any]) -> float:
    """A size's bus bandwidth: the better of out of place and in place."""
    return max((side or {}).get("busbw") or 0.0 for side in (row.get("out_of_place"), row.get("in_place")))


# A run on one node that lists its GPUs and then prints neither a row nor its failure stopped at NCCL's init or
# first collective (or the paste ends there). NCCL troubleshooting, "PCI Access Control Services (ACS)": IO
# virtualization (VT-d, IOMMU) and ACS redirect peer-to-peer PCIe traffic to the CPU root complex, "causing a
# significant performance reduction or even a hang"; NCCL_P2P_DISABLE=1 takes P2P out to confirm it
# (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html; env.html, NCCL_P2P_DISABLE).
STOPPED = Remediation(
    "The run printed its GPUs and then nothing: if it hangs there, NCCL is stuck at its first peer-to-peer transfer "
    "on this node, which PCIe ACS or an IOMMU that translates the GPUs' DMA cause. Rerun with P2P off to confirm; "
    "if that runs, disable ACS on the PCIe switches and bridges (firmware, or setpci) and boot with iommu=pt (or the "
    "IOMMU off) following NCCL's troubleshooting guide.",
    [
        "NCCL_P2P_DISABLE=1 {rerun}  # runs where the plain run hangs: peer-to-peer between the GPUs is broken",
        "sudo lspci -vvv | grep -i 'ACSCtl'  # SrcValid+ (ReqRedir+ CmpltRedir+) on a bridge: ACS is on",
        "cat /proc/cmdline; sudo dmesg | grep -iE 'DMAR|iommu'  # intel_iommu=on / amd_iommu without iommu=pt",
    ],
)

STOPPED_SAID = (
    "no result after its device list: the run stopped (or the paste ends) before its first size; a hang there on "
    "one node is most often peer-to-peer blocked by PCIe ACS or the IOMMU"
)


def _judge_run(run: dict[str, Any], gpus: list[dict[str, Any]], shown: dict[str, Any]) -> Judged:
    rows = run.get("rows") or []
    if not rows:
        return no_rows(run)
    wrong = sum(
        int((side or {}).get("wrong") or 0) for r in rows for side in (r.get("out_of_place"), r.get("in_place"))
    )
    if wrong or (run.get("out_of_bounds") or 0) > 0:
        return judged(
            Status.FAIL,
            f"{wrong or run['out_of_bounds']} wrong values: the data was corrupted on the way",
            fix=Remediation(
                "nccl-tests checks every result; wrong values with no error mean broken P2P (IOMMU/ACS), a failing "
                "link or GPU memory.",
                ["sudo dmesg | grep -iE 'xid|iommu|dmar'", "NCCL_P2P_DISABLE=1 {rerun}"],
            ),
        )
    largest = max(rows, key=lambda r: r.get("bytes") or 0)
    busbw = peak_busbw(largest)
    metric = Metric("busbw", round(busbw, 3), "GB/s", labels={"bytes": int(largest.get("bytes") or 0)})
    if all(peak_busbw(r) == 0 for r in rows):
        return judged(Status.SKIP, "unjudgeable, every bus bandwidth is 0 (one rank alone)", [metric], NO_MPI)
    if (largest.get("bytes") or 0) < MIN_BYTES:
        size = references.size_text(int(largest.get("bytes") or 0))
        return judged(
            Status.SKIP,
            f"unjudgeable, largest message {size} (peak needs >= 1 GiB): busbw {busbw:.4g} GB/s",
            [metric],
            TOO_SMALL,
        )
    return against_reference(run, busbw, metric, machine(run, gpus), shown)


def no_rows(run: dict[str, Any]) -> Judged:
    """A run without a result row: failed (its failure line says why, judged with the file's errors), stopped after
    the device list of GPUs on one node (a hang of peer-to-peer suspected), or only a header."""
    if run.get("failure"):
        return judged(Status.SKIP, f"no result rows: the run failed ({run['failure']})")
    if len(run.get("devices") or []) > 1 and len(run.get("hosts") or []) == 1:
        return judged(Status.WARN, STOPPED_SAID, fix=STOPPED)
    return judged(Status.SKIP, "no result rows")


# Bytes per element of nccl-tests' data types (src/common.cu, test_typenames).
TYPE_BYTES = {
    "int8": 1,
    "uint8": 1,
    "half": 2,
    "bfloat16": 2,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "int32": 4,
    "uint32": 4,
    "float": 4,
    "int64": 8,
    "uint64": 8,
    "double": 8,
}


def collective_of(run: dict[str, Any]) -> str | None:
    """The collective a run says, or the one its rows show where it does not (an excerpt, the old format):
    nccl-tests prints each rank's element count, so a reduction whose count covers the whole message is an
    all-reduce and one whose count is a rank's share a reduce-scatter (src/all_reduce.cu, reduce_scatter.cu,
    AllReduceGetCollByteCount and ReduceScatterGetCollByteCount). All-gather and all-to-all look alike: None."""
    if run.get("collective"):
        return run["collective"]
    row = max(run.get("rows") or [{}], key=lambda r: r.get("bytes") or 0)
    size, count, width = row.get("bytes") or 0, row.get("count") or 0, TYPE_BYTES.get(str(row.get("type")))
    if not (size and count and width) or str(row.get("redop") or "none") == "none" or row.get("root") not in (-1, None):
        return None
    if count * width == size:
        return "all_reduce"
    ranks = run.get("ranks") or 0
    return "reduce_scatter" if ranks > 1 and count * width * ranks == size else None


def run_name(run: dict[str, Any]) -> str:
    collective = collective_of(run) or "collective"
    where = f" line {run['line']}" if run.get("line") else ""
    return f"{collective}{where}"


def machine(run: dict[str, Any], gpus: list[dict[str, Any]]) -> dict[str, Any]:
    """The GPU model, GPUs and nodes of a run: from its device list, else from GPUs elsewhere in the file."""
    names = [d.get("name") for d in run.get("devices") or [] if d.get("name")]
    if not names:
        names = [g.get("name") for g in gpus if g.get("name")]
    entries = {(gpu_model({"name": n}) or {}).get("model"): gpu_model({"name": n}) for n in names}
    hosts = run.get("hosts") or []
    entry = next(iter(entries.values())) if len(entries) == 1 else None
    return {
        "model": entry["model"] if entry else None,
        "entry": entry or {},
        "names": sorted({str(n) for n in names}),
        "gpus": run.get("ranks") or (len(gpus) if gpus and len(hosts) <= 1 else None),
        "nodes": len(hosts) if hosts else (1 if gpus else None),
    }


def against_reference(
    run: dict[str, Any], busbw: float, metric: Metric, found: dict[str, Any], shown: dict[str, Any]
) -> Judged:
    figure = COLLECTIVE_FIGURE.get(collective_of(run) or "")
    said = f"busbw {busbw:.4g} GB/s at {references.size_text(metric.labels['bytes'])}"
    if figure is None:
        return judged(Status.PASS, f"{said}; no published figure for this collective: shown, not judged", [metric])
    if found["model"] is None:
        unknown = ", ".join(found["names"]) or "not in the output (the device list was cut)"
        return judged(
            Status.SKIP,
            f"{said}; unjudgeable: GPU model {unknown} has no published figure",
            [metric],
            Remediation("The verdict needs the GPU model.", ["nvidia-smi -L  # add its output to the file"]),
        )
    if (found["nodes"] or 1) > 1:
        return across_nodes(run, said, busbw, metric, found, figure, shown)
    return one_node(run, said, busbw, metric, found, figure, shown)


def one_node(
    run: dict[str, Any], said: str, busbw: float, metric: Metric, found: dict[str, Any], figure: str, shown: dict
) -> Judged:
    """Within a node: the published figure for the model, GPU count and algorithm (Ring where NCCL chooses:
    every algorithm reaches it; NVLS, where the node has it, more: a figure at NVLS's level is judged as NVLS,
    one below it is told what NVLS would give). Without a published figure: its links' (by_links)."""
    algo = routes.algorithm(run.get("env") or {})
    where = f"{said} on {found['gpus']}x {found['model']}"
    stated = ("gpus", "algo")
    nvls = references.healthy(figure, found["model"], stated, gpus=found["gpus"], nodes=1, algo="nvls")
    if algo is None and nvls and busbw >= nvls.value * references.PASS_AT:
        return verdict_on(busbw, metric, expect.Expectation(nvls.value, nvls.cite()), where, "NVLS")
    healthy = references.healthy(figure, found["model"], ("gpus",), gpus=found["gpus"], nodes=1, algo=algo or "ring")
    if healthy is None:
        return by_links(busbw, metric, found, where, figure, run, shown)
    row, fix = verdict_on(
        busbw, metric, expect.Expectation(healthy.value, healthy.cite()), where, f"NCCL_ALGO={algo}" if algo else "Ring"
    )
    if row.status == Status.PASS and algo is None and nvls:
        row.summary += f"; NVLS would give ~{nvls.value:.4g} (is it off? NCCL_NVLS_ENABLE, the fabric manager)"
    return row, fix


def by_links(
    busbw: float, metric: Metric, found: dict[str, Any], where: str, figure: str, run: dict[str, Any], shown: dict
) -> Judged:
    """No published figure for the model and GPU count: the links between the GPUs set it. Where the file's
    `topo -m` shows as many GPUs as the run, the best ring over them: NVLink all the way (bridged pairs, a mesh)
    at the GPU's NVLink (routes.nvlink_allreduce), else PCIe. Without it, a model with no NVLink (hardware.toml)
    over its x16 link. PCIe goes through host memory unless P2P is known to work (a GeForce never has it): an
    estimate, and said so."""
    model, gpus = found["entry"], found["gpus"] or 0
    ring = ring_nvlinks(shown.get("topology") or {}, gpus)
    if (
        figure != "allreduce_busbw"
        or not model.get("pcie_gen")
        or gpus < 2
        or (model.get("nvlink_links") and ring is None)
    ):
        return judged(
            Status.SKIP,
            f"{where}; unjudgeable: no published {figure} for that GPU count",
            [metric],
            Remediation("The links between the GPUs set the figure.", ["nvidia-smi topo -m  # add its output"]),
        )
    base = {"name": model["names"][0], "pcie": {"max_gen": model["pcie_gen"], "max_width": 16}}
    if ring:
        linked = [{**base, "index": i, "nvlinks": [{"active": True}] * ring} for i in range(gpus)]
        expected = routes.nvlink_allreduce(linked, routes.algorithm(run.get("env") or {}))
        how = f"NVLink x{ring} per GPU all round the ring (topo -m)"
    else:
        expected = routes.allreduce_expectation([{**base, "index": i} for i in range(gpus)], {})
        how = f"PCIe Gen{model['pcie_gen']} x16 through host memory"
    if expected is None:
        return judged(Status.SKIP, f"{where}; unjudgeable: no figure for its links", [metric])
    return verdict_on(busbw, metric, expected, where, how)


def ring_nvlinks(topology: dict[str, Any], gpus: int) -> int | None:
    """The NVLinks of the best ring's thinnest hop over a pasted `topo -m` of exactly `gpus` GPUs (0 where a
    hop is PCIe); None where the file shows no such matrix."""
    matrix = topology.get("nvlinks")
    if not matrix or len(matrix) != gpus:
        return None

    def links(a: int, b: int) -> int:
        return int(matrix[a][b] or 0)

    ring = routes.best_ring(gpus, links)
    return min(links(a, b) for a, b in zip(ring, [*ring[1:], ring[0]], strict=True))


def across_nodes(
    run: dict[str, Any],
    said: str,
    busbw: float,
    metric: Metric,
    found: dict[str, Any],
    figure: str,
    shown: dict[str, Any],
) -> Judged:
    """Between nodes the network sets the figure, or the NVLink of one multi-node domain (an NVL72 rack)."""
    where = f"{said} on {found['gpus'] or '?'} GPUs, {found['nodes']} nodes of {found['model']}"
    domain = references.healthy(figure, found["model"], ("link",), link="mnnvl")
    if domain and (found["gpus"] or 0) <= (domain.gpus or 0):
        expected = expect.Expectation(domain.value, domain.cite())
        return verdict_on(
            busbw,
            metric,
            expected,
            f"{where} (taken as one NVLink domain: {found['model']} racks hold {domain.gpus} GPUs)",
            "one multi-node NVLink domain",
        )
    network = nic_expectation(run, found, shown)
    if network is not None:
        return over_network(busbw, metric, network, where)
    nics = shown.get("ib_devices") or []
    shown = f" ({len(nics)} NICs in NCCL's log, their speed not)" if nics else ""
    return judged(
        Status.SKIP,
        f"{where}; unjudgeable: the network each node uses is not in the output{shown}",
        [metric],
        Remediation(
            "Between nodes the NICs set the figure: their count and speed are needed (add ibstat's output).",
            [
                "ibstat",
                "NCCL_DEBUG=INFO {rerun} 2>&1 | grep -E 'NET/IB : Using|Using network'",
            ],
        ),
    )


def nic_expectation(run: dict[str, Any], found: dict[str, Any], shown: dict[str, Any]) -> expect.Expectation | None:
    """The healthy figure over the NICs the file shows (ibstat or ibstatus, taken as every node's): those
    NCCL's log names, else those NCCL would pick (nics.nccl_nics: active, NCCL_IB_HCA, one fabric and
    speed), at most one per GPU of a node (NCCL pairs each GPU with its nearest NIC); NICs x line rate x the
    share published for the fabric the log names (EFA's below InfiniBand's), else the ports' own."""
    ports = nics.named_ports(shown.get("ports") or [], shown.get("ib_devices") or [])
    used, left = nics.nccl_nics(ports, set(), run.get("env") or {})
    per_node = (found["gpus"] or 0) // (found["nodes"] or 1)
    if per_node and len(used) > per_node:
        left += [f"{p['device']}:{p['port']} beyond one NIC per GPU ({per_node} per node)" for p in used[per_node:]]
        used = used[:per_node]
    return nics.network_expectation(used, left, "each node as this file's ibstat shows", shown.get("fabric"))


def over_network(busbw: float, metric: Metric, network: expect.Expectation, where: str) -> Judged:
    """A figure the NICs cannot carry in a ring is in-network reduction (SHARP, CollNet, NVLS tree) or NICs
    the file does not show: no published figure for it, so unjudgeable rather than a pass."""
    if busbw > network.value * expect.PEAK_MARGIN:
        return judged(
            Status.SKIP,
            f"{where}; unjudgeable: above what the NICs shown carry ({network.value:.4g} GB/s, {network.source}): "
            "in-network reduction (SHARP/CollNet, NVLS tree) or more NICs than the file shows",
            [metric],
        )
    return verdict_on(busbw, metric, network, where, "the NICs NCCL uses")


def verdict_on(busbw: float, metric: Metric, expected: expect.Expectation, where: str, normal: str) -> Judged:
    status, judged_metric = expect.verdict("busbw", busbw, "GB/s", expected, references.FAIL_BELOW)
    judged_metric.labels = metric.labels
    if status == Status.PASS:
        return judged(status, f"{where}: normal for {normal} ({judged_metric.share()})", [judged_metric])
    return judged(
        status,
        f"{where}: {judged_metric.share()}",
        [judged_metric],
        Remediation(
            "Below healthy systems of the model: a degraded link, P2P or NVLink off, or NCCL on another transport.",
            [
                "nvidia-smi topo -m",
                "nvidia-smi nvlink -s",
                "NCCL_DEBUG=INFO {rerun} 2>&1 | grep -E 'via|NVLS'",
            ],
        ),
    )
