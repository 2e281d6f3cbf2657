"""The PyTorch side of bench/densenet_memory.sh: densenet121 with the
features frozen (requires_grad False, BatchNorm in training mode), SGD
momentum 0.9, BATCH x 3 x 224 x 224 random inputs, STEPS steps, 2
threads; prints the process's peak RSS in MB (ru_maxrss)."""
import resource
import sys

import torch
import torchvision

batch, steps = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(2)
torch.manual_seed(0)
m = torchvision.models.densenet121(num_classes=4)
for p in m.features.parameters():
    p.requires_grad = False
m.train()
opt = torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.01, momentum=0.9)
x = torch.rand(batch, 3, 224, 224)
y = torch.randint(0, 4, (batch,))
for _ in range(steps):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(m(x), y).backward()
    opt.step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
