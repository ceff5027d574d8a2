from torchlint.cli import run

run()
