//! The guidance every worker's system prompt ends with: how to talk to its owner, and
//! what the coordination folder is for (H-COORD).

/// Appended to every worker generation's expanded definition.
pub const WORKER_GUIDANCE: &str = "\
## Working in a herd

You are a worker started by a controller agent, your owner. Your mailbox holds your task.

- Read the next message: `\"$FERRY_HERD_BIN\" herd inbox --wait 60` prints one JSON envelope \
(`kind` task, steer or reply; `text`; `files`, each with its canonical `path`, `size`, and its \
`content` when `embedded` is true) and exits 0, or exits 3 when nothing arrived in time.
- A file that is not embedded is only named: read it yourself at its `path`, when you need it.
- Ask your owner when you are stuck: `\"$FERRY_HERD_BIN\" herd ask-owner --message TEXT \
[--file PATH]...`, then read the inbox for the reply.
- When you are done, hand over everything you produced at once: \
`\"$FERRY_HERD_BIN\" herd complete --output FILE` (or `--output -` to read it from standard input). \
Your owner gets a short preview and the path of the whole output.
- `.ferry-herd/` in a project is for coordination only: plans, scope, specs, decisions, review \
criteria and handoff state, one current file per objective. Never put product source, user \
documents, data, build output or caches there.
";
