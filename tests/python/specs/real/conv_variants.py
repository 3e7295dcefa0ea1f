"""1-D and transposed convolutions the way models write them: a sequence
path of nn.Conv1d over (N, C, L) data then nn.ConvTranspose1d (stride 2),
and an image path of nn.Conv2d then a grouped
nn.ConvTranspose2d(stride=2, output_padding=1, groups=2), which doubles the
image; the sequence path's channel means shift the image path's output.
MSE to a target image, Adam. DTYPE=float64 builds it in float64 (the
transposed convolutions then run on im2col + GEMM)."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq1 = nn.Conv1d(4, 8, 3, padding=1)
        self.seq2 = nn.Conv1d(8, 8, 3, padding=2, dilation=2, groups=2)
        self.seq_up = nn.ConvTranspose1d(8, 4, 4, stride=2, padding=1)
        self.img = nn.Conv2d(3, 8, 3, padding=1)
        self.img_up = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1, groups=2)

    def forward(self, seq, img):
        s = F.relu(self.seq1(seq))                # (N, 8, L)
        s = F.relu(self.seq2(s))                  # (N, 8, L)
        s = torch.tanh(self.seq_up(s))            # (N, 4, 2L)
        h = F.relu(self.img(img))                 # (N, 8, H, W)
        h = self.img_up(h)                        # (N, 4, 2H, 2W)
        return h + s.mean(dim=2)[:, :, None, None]


def build():
    torch.manual_seed(0)
    dt = getattr(torch, os.environ.get("DTYPE", "float32"))
    model = Net().to(dt)
    seq = torch.randn(2, 4, 10, dtype=dt)
    img = torch.rand(2, 3, 6, 6, dtype=dt)
    y = torch.rand(2, 4, 12, 12, dtype=dt)
    return trainstep.TrainSpec(model, F.mse_loss, torch.optim.Adam(model.parameters(), lr=1e-3),
                               (seq, img), y, name="conv_variants")
