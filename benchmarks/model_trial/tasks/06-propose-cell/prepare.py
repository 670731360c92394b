"""Make data/experiments.csv as a German-locale spreadsheet exports it: semicolons between
fields, decimal commas, day-first timestamps."""

import random
from datetime import datetime, timedelta
from pathlib import Path

rng = random.Random(11)
MODELS = ["resnet18", "resnet50", "vit-small"]


def de(x, digits):
    return f"{x:.{digits}f}".replace(".", ",")


lines = ["run_id;started;model;learning_rate;batch_size;epochs;val_loss;val_accuracy"]
start = datetime(2024, 3, 4, 9, 0)
for i in range(1, 41):
    start += timedelta(minutes=rng.randint(35, 400))
    model = MODELS[i % 3]
    lr = rng.choice([0.1, 0.03, 0.01, 0.003, 0.001])
    loss = 0.35 + abs(rng.gauss(0, 0.12)) + (0.1 if model == "resnet18" else 0) + (0.15 if lr == 0.1 else 0)
    acc = max(0.5, min(0.99, 1.02 - loss * 0.45 + rng.gauss(0, 0.01)))
    lines.append(
        f"run-{i:03d};{start:%d.%m.%Y %H:%M};{model};{de(lr, 3)};{rng.choice([32, 64, 128])};"
        f"{rng.choice([10, 20, 30])};{de(loss, 4)};{de(acc, 4)}"
    )
Path("data").mkdir(exist_ok=True)
Path("data/experiments.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
