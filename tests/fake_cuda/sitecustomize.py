"""Pretend to be a GPU runtime (Colab's) on a machine without one: `make nbval` puts this folder on the
notebooks' PYTHONPATH, so every chapter runs with `torch.cuda.is_available()` answering True while any
real use of CUDA still fails ("Torch not compiled with CUDA enabled").

A chapter that sends a model, a drafter's weights or a tensor to CUDA because CUDA is *available* (rather
than because the model it feeds is there) crashes under nbval here, as it would mix devices on Colab. The
device rule it enforces: the tiny zoo lives on the CPU wherever it runs (`zoo.default_device`), and code
decides where tensors go from the model's own device."""

import os

if os.environ.get("SPECDEC_FAKE_CUDA", "1") != "0":
    import torch

    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
