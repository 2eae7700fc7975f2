"""Cluster mode's parts: one gpudoctor per node, started by torchrun or srun, talking through
torch.distributed's store. `env` reads the launcher's environment, `store` and `session` carry the messages,
`context` is what a cross-node check sees, and `node` what a node and rank 0 tell each other. A node's whole
part is gpudoctor.engine.cluster_run.run_node."""
