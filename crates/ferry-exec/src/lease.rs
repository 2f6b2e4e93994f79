//! One requester held for a series of operations that belong together (an upload's
//! stage, then its commit): in host mode the same worker answers all of them.

use std::fs::File;
use std::sync::Arc;

use crate::ops::{Op, Reply};
use crate::worker::{Failure, Worker};
use crate::{RequestError, Requester};

/// A requester with, in host mode, one worker kept aside for this caller.
#[derive(Debug)]
pub struct Lease {
    requester: Arc<Requester>,
    /// The worker leased (host mode); `None` until the first call, or after it died.
    worker: Option<Worker>,
}

impl Lease {
    /// Leases from `requester`; the worker is taken at the first call.
    pub fn new(requester: Arc<Requester>) -> Lease {
        Lease {
            requester,
            worker: None,
        }
    }

    /// Performs `op` in this lease's worker. When that worker has died, the call fails
    /// (`worker_failed`) and the next one starts a fresh worker.
    pub fn execute(&mut self, op: Op) -> Result<(Reply, Option<File>), RequestError> {
        match &*self.requester {
            Requester::InProcess(executor) => executor.execute(op),
            Requester::Worker(pool) => match &mut self.worker {
                // Once the lease has been used, its worker alone answers: one that died
                // meanwhile fails the call (and the next call starts a fresh one).
                Some(worker) => {
                    let result = worker.perform(&op);
                    if !worker.is_healthy() {
                        self.worker = None;
                    }
                    result.map_err(Failure::into_request_error)
                }
                None => pool.perform_first(&mut self.worker, &op),
            },
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let (Requester::Worker(pool), Some(worker)) = (&*self.requester, self.worker.take()) {
            pool.give_back(worker);
        }
    }
}
