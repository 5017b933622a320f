"""Print the HTML that a notebook shows for an OpCounter (the view pasted in the README).

    python scripts/examples/html_view.py
"""

import torch
from torch import nn

from dispatchprof import OpCounter

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
x = torch.randn(4, 64)
with torch.no_grad(), OpCounter(model, devices="H100-SXM") as c:
    model(x)
print(c._repr_html_().replace("</table><table>", "</table>\n<table>"))
