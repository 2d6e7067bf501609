start=$(date +%s); echo "== padbench tune $(date -u +%T)" > /tmp/t/tune.log
python3 -P -m padbench.cli tune examples/gpu-tune-llama-3.1-8b.yaml --set gpus=2 --set tune.budget=11m \
  --set 'tune.space.checkpointing=[none, ops, full]' --json /tmp/t/tune.json > /tmp/t/tune.txt 2>&1
echo "== tune exit $? after $(( $(date +%s) - start )) s $(date -u +%T)" >> /tmp/t/tune.log
