"""The classic VAE example on small synthetic images: an MLP encoder to mu and logvar, the
reparameterization trick with torch.randn_like, a sigmoid decoder, F.binary_cross_entropy (sum)
plus the KL term, Adam; then sampling from the prior. The compared steps take their noise from the
data (the libraries' random streams differ); randn_like itself is checked for shape and spread."""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim

PIXELS, LATENT = 64, 4


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(PIXELS, 32)
        self.fc21 = nn.Linear(32, LATENT)
        self.fc22 = nn.Linear(32, LATENT)
        self.fc3 = nn.Linear(LATENT, 32)
        self.fc4 = nn.Linear(32, PIXELS)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar, eps=None):
        std = torch.exp(0.5 * logvar)
        if eps is None:
            eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x, eps=None):
        mu, logvar = self.encode(x.view(-1, PIXELS))
        z = self.reparameterize(mu, logvar, eps)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, PIXELS), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def make_data(rng):
    return {"images": (rng.random((32, 1, 8, 8)) < 0.3).astype(np.float32),
            "noise": rng.standard_normal((4, 8, LATENT)).astype(np.float32)}


def build():
    return VAE()


def run(model, data):
    images, noise = torch.from_numpy(data["images"]), torch.from_numpy(data["noise"])
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images), batch_size=8, shuffle=False)
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    losses = []
    for _epoch in range(2):
        train_loss = 0.0
        for batch_idx, (data_batch,) in enumerate(loader):
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(data_batch, eps=noise[batch_idx])
            loss = loss_function(recon_batch, data_batch, mu, logvar)
            loss.backward()
            train_loss += loss.item()
            optimizer.step()
        losses.append(train_loss / len(loader.dataset))
    model.eval()
    with torch.no_grad():
        recon, mu, logvar = model(images[:4], eps=torch.zeros(4, LATENT))
        eps = torch.randn_like(torch.empty(64, 64))
        sample = model.decode(torch.randn(16, LATENT)).cpu()
    return {"losses": losses, "recon": recon.tolist(), "mu": mu.tolist(), "logvar": logvar.tolist(),
            "noise_shape": list(eps.shape), "noise_spread": [abs(eps.mean().item()) < 0.1, abs(eps.std().item() - 1) < 0.1],
            "sample_shape": list(sample.view(16, 1, 8, 8).shape), "sample_in_range": bool(((sample >= 0) & (sample <= 1)).all())}
