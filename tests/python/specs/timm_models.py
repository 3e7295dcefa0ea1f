"""timm models, unmodified, built without pretrained weights: $TIMM names
one (resnet18, mobilenetv3_small_050, vit_tiny_patch16_224 at 32x32,
convnext_atto, whose permuted LayerNorm reaches 2.x's prims.copy_strided), trained
with AdamW on a batch of two 32x32 images.
mobilenetv3_small_050 at this size ends in BatchNorm over two samples at
1x1, whose gradients one rounding moves by far more than their scale
(golden.MAX_SPREAD)."""
import os

import timm
import torch
import torch.nn.functional as F

import trainstep


def build():
    name = os.environ.get("TIMM", "resnet18")
    torch.manual_seed(0)
    kw = dict(img_size=32) if name.startswith("vit") else {}
    model = timm.create_model(name, pretrained=False, num_classes=10, **kw)
    x, y = torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,))
    return trainstep.TrainSpec(model, F.cross_entropy,
                               torch.optim.AdamW(model.parameters(), lr=1e-3), (x,), y,
                               name=f"timm_{name}")
