"""The model, data and single-process reference shared by the training tests."""
import torch
import torch.nn as nn

STEPS = 10
BATCH = 4  # per rank


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 16), nn.Tanh(), nn.Linear(16, 4))


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(BATCH, 8, generator=g), torch.randn(BATCH, 4, generator=g)


def reference(world_size, optimizer_class, **kwargs):
    """One process on the union of the ranks' batches: with equal batches and
    a mean loss, its gradient is the average DDP all-reduces."""
    model = make_model()
    opt = optimizer_class(model.parameters(), **kwargs)
    for step in range(STEPS):
        xs, ys = zip(*(batch(step, r) for r in range(world_size)))
        opt.zero_grad()
        nn.functional.mse_loss(model(torch.cat(xs)), torch.cat(ys)).backward()
        opt.step()
    return model.state_dict(), opt.state_dict()
