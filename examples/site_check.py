"""An example site-local check: load it with `gpudoctor check --checks-dir examples/`.

A check is a function of the gathered facts that returns a Result; it never prints. This one asks that
every GPU is the model the site ordered.
"""

from gpudoctor.api import CheckContext, Remediation, Result, Status, check


@check("site.gpu-model", "Every GPU is the model we bought", needs=("nvml",), settings={"model": "H100"})
def gpu_model(ctx: CheckContext) -> Result:
    """Every GPU's name contains the configured model string."""
    wrong = [g for g in ctx.gpus if ctx.settings["model"] not in (g.get("name") or "")]
    if not wrong:
        return Result(Status.PASS, f"every GPU is an {ctx.settings['model']}")
    return Result(
        Status.FAIL,
        f"GPU {wrong[0]['index']} is a {wrong[0]['name']}",
        remediation=Remediation("This node is in the wrong partition.", ["scontrol update ..."]),
    )
