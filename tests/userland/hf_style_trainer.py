"""A Hugging Face-style Trainer written without transformers: a `TrainingArguments`-like dataclass, a `Trainer`
with `train()`, `evaluate()` and an overridable `compute_loss`, and callbacks called at each logging step.

`compute_loss` mines the hardest examples of each batch (sorting the per-example losses: `torch.sort` has no
device kernel) and the Trainer logs the loss with `.item()` every step (`logging_steps=1`).
"""
# BENCH-ONLY: no product fix of its own to guard (the suite's time budget)
import os
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


@dataclass
class TrainingArguments:
    output_dir: str = "out"
    num_train_epochs: int = 2
    per_device_train_batch_size: int = 16
    per_device_eval_batch_size: int = 16
    learning_rate: float = 3e-4
    weight_decay: float = 0.01
    logging_steps: int = 1
    hard_example_ratio: float = 0.5
    seed: int = 0


@dataclass
class TrainerState:
    global_step: int = 0
    epoch: float = 0.0
    log_history: list[dict[str, float]] = field(default_factory=list)


class TrainerCallback:
    def on_train_begin(self, args: TrainingArguments, state: TrainerState) -> None:
        pass

    def on_log(self, args: TrainingArguments, state: TrainerState, logs: dict[str, float]) -> None:
        pass

    def on_train_end(self, args: TrainingArguments, state: TrainerState) -> None:
        pass


class PrinterCallback(TrainerCallback):
    def on_log(self, args: TrainingArguments, state: TrainerState, logs: dict[str, float]) -> None:
        if state.global_step % 4 == 0:
            print({"step": state.global_step, **logs})


class TextClassifier(nn.Module):
    def __init__(self, vocab: int = 1000, dim: int = 32, n_labels: int = 4) -> None:
        super().__init__()
        self.embeddings = nn.EmbeddingBag(vocab, dim)
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Linear(dim, n_labels)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(self.embeddings(input_ids)))


class Trainer:
    def __init__(self, model: nn.Module, args: TrainingArguments, train_dataset: TensorDataset,
                 eval_dataset: TensorDataset, callbacks: list[TrainerCallback] | None = None) -> None:
        self.device = torch.device(os.environ.get("DEVICE", "neuron"))
        self.model = model.to(self.device)
        self.args = args
        self.train_dataset = train_dataset
        self.eval_dataset = eval_dataset
        self.callbacks = callbacks or []
        self.state = TrainerState()

    def get_train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_dataset, batch_size=self.args.per_device_train_batch_size, shuffle=True,
                          drop_last=True)

    def get_eval_dataloader(self) -> DataLoader:
        return DataLoader(self.eval_dataset, batch_size=self.args.per_device_eval_batch_size, drop_last=True)

    def create_optimizer(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.model.parameters(), lr=self.args.learning_rate,
                                 weight_decay=self.args.weight_decay)

    def _prepare_inputs(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {k: v.to(self.device) for k, v in inputs.items()}

    def compute_loss(self, model: nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        logits = model(inputs["input_ids"])
        per_example = F.cross_entropy(logits, inputs["labels"], reduction="none")
        k = max(1, int(per_example.numel() * self.args.hard_example_ratio))
        hardest, _ = torch.sort(per_example, descending=True)  # EXPECT: cpu_fallback
        return hardest[:k].mean()

    def training_step(self, model: nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        model.train()
        inputs = self._prepare_inputs(inputs)
        loss = self.compute_loss(model, inputs)
        loss.backward()
        return loss.detach()

    def log(self, logs: dict[str, float]) -> None:
        logs["epoch"] = round(self.state.epoch, 2)
        self.state.log_history.append(logs)
        for cb in self.callbacks:
            cb.on_log(self.args, self.state, logs)

    def train(self) -> TrainerState:
        torch.manual_seed(self.args.seed)
        loader = self.get_train_dataloader()
        optimizer = self.create_optimizer()
        for cb in self.callbacks:
            cb.on_train_begin(self.args, self.state)
        for epoch in range(self.args.num_train_epochs):
            for step, batch in enumerate(loader):
                tr_loss = self.training_step(self.model, {"input_ids": batch[0], "labels": batch[1]})
                optimizer.step()
                optimizer.zero_grad()
                self.state.global_step += 1
                self.state.epoch = epoch + (step + 1) / len(loader)
                if self.state.global_step % self.args.logging_steps == 0:
                    self.log({"loss": round(tr_loss.item(), 4)})  # EXPECT: sync_point
        for cb in self.callbacks:
            cb.on_train_end(self.args, self.state)
        return self.state

    def evaluate(self) -> dict[str, float]:
        self.model.eval()
        total = torch.zeros((), device=self.device)
        correct = torch.zeros((), device=self.device)
        with torch.no_grad():
            for input_ids, labels in self.get_eval_dataloader():
                inputs = self._prepare_inputs({"input_ids": input_ids, "labels": labels})
                logits = self.model(inputs["input_ids"])  # EXPECT: first_call_compile
                total += F.cross_entropy(logits, inputs["labels"], reduction="sum")
                correct += (logits.argmax(-1) == inputs["labels"]).sum()
        n = len(self.eval_dataset)
        metrics = {"eval_loss": total.item() / n, "eval_accuracy": correct.item() / n}  # ALSO: sync_point
        self.log(metrics)
        return metrics


def main() -> None:
    torch.manual_seed(0)
    train_ds = TensorDataset(torch.randint(0, 1000, (128, 24)), torch.randint(0, 4, (128,)))
    eval_ds = TensorDataset(torch.randint(0, 1000, (32, 24)), torch.randint(0, 4, (32,)))
    args = TrainingArguments()
    trainer = Trainer(TextClassifier(), args, train_ds, eval_ds, callbacks=[PrinterCallback()])
    trainer.train()
    print(trainer.evaluate())


if __name__ == "__main__":
    main()
