"""A segmentation-style Dice loss written as segmentation_models_pytorch
writes it: F.one_hot(target, num_classes) against softmax probabilities."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep

CLASSES = 3


def dice_loss(logits, target, eps=1e-6):
    probs = logits.softmax(1)  # [N, C, H, W]
    onehot = F.one_hot(target, CLASSES).permute(0, 3, 1, 2).to(probs.dtype)
    inter = (probs * onehot).sum((0, 2, 3))
    union = probs.sum((0, 2, 3)) + onehot.sum((0, 2, 3))
    return 1 - ((2 * inter + eps) / (union + eps)).mean()


def build():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, CLASSES, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(4, 1, 8, 8)
    y = torch.randint(0, CLASSES, (4, 8, 8))
    return trainstep.TrainSpec(model, dice_loss, opt, (x,), y, name="one_hot_dice")
