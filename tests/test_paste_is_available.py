"""torch's own answer that it sees no GPU, as users paste it from a REPL or a notebook (issue 49): the call
torch.cuda.is_available() and the result False on the next line (Python's interactive prompt, IPython's In/Out
cells), or both in one line. It is the same fact as torch's 'CUDA is not available' warning
(data/signatures/node.toml torch-cuda-not-available), with its cures; and in a container started without its GPUs,
that start's."""

from __future__ import annotations

import pytest

from gpudoctor.paste import read

NOT_AVAILABLE = "torch-cuda-not-available"


def ids(text: str) -> set[str]:
    return {s["id"] for s in read(text).signatures}


@pytest.mark.parametrize(
    "text",
    [
        ">>> import torch\n>>> torch.cuda.is_available()\nFalse\n",  # Python's interactive prompt
        "In [2]: torch.cuda.is_available()\nOut[2]: False\n",  # IPython and Jupyter
        "In [2]: torch.cuda.is_available()\n\nOut[2]: False\n",  # a blank line between, as pasted
        ">>> print(torch.cuda.is_available())\nFalse\n",
        "torch.cuda.is_available() returns False\n",
        "print(torch.cuda.is_available())  # False\n",
    ],
    ids=("python", "ipython", "blank line", "print", "prose", "comment"),
)
def test_torch_answering_false_is_cuda_not_available(text: str) -> None:
    assert NOT_AVAILABLE in ids(text)


@pytest.mark.parametrize(
    "text",
    [
        ">>> torch.cuda.is_available()\nTrue\n",
        "In [2]: torch.cuda.is_available()\nOut[2]: True\n",
        "if not torch.cuda.is_available():\n    False\n",  # code, not an answer
        ">>> torch.cuda.is_available()\n>>> x = False\n",
    ],
    ids=("true", "ipython true", "code", "another statement"),
)
def test_anything_else_is_no_answer(text: str) -> None:
    assert NOT_AVAILABLE not in ids(text)


def test_false_in_a_container_started_without_gpus_names_the_start() -> None:
    text = "$ sudo docker run -it pytorch/pytorch python\n>>> torch.cuda.is_available()\nFalse\n"
    assert {NOT_AVAILABLE, "container-started-no-nvidia-driver"} <= ids(text)
