"""An example site-local check: load it with `gpudoctor check --checks-dir examples/`.

A check is a function of the gathered facts that returns a Result; it never prints. This one asks that
every GPU is the model the site ordered.
"""

from gpudoctor.model import Remediation, Result, Status
from gpudoctor.registry import check
from gpudoctor.runner import CheckContext, live_gpus


@check("site.gpu-model", "Every GPU is the model we bought", settings={"model": "H100"})
def gpu_model(ctx: CheckContext) -> Result:
    """Every GPU's name contains the configured model string."""
    wrong = [g for g in live_gpus(ctx.facts) if ctx.settings["model"] not in (g.get("name") or "")]
    if not wrong:
        return Result("site.gpu-model", Status.PASS, f"every GPU is an {ctx.settings['model']}")
    return Result(
        "site.gpu-model",
        Status.FAIL,
        f"GPU {wrong[0]['index']} is a {wrong[0]['name']}",
        remediation=Remediation("This node is in the wrong partition.", ["scontrol update ..."]),
    )
