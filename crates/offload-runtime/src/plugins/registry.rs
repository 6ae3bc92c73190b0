//! Discovery: every plugin in one list, and each physical GPU listed once, through its preferred
//! plugin, with the other plugins' handles of it kept as alternates.

use crate::plugins::cuda;
use crate::plugins::host;
use crate::plugins::interface::{Backend, BackendKind, Platform};
use crate::plugins::liboffload;
use crate::plugins::opencl;
use crate::Result;
use std::sync::Arc;

/// A plugin's discovery: its devices, or why it has none.
pub type Discover = fn() -> Result<Vec<Arc<dyn Backend>>, String>;

/// One plugin as discovery sees it.
pub struct Plugin {
    /// Its name in messages (`"cuda"`).
    pub name: &'static str,
    /// Finds its devices.
    pub discover: Discover,
    /// Whether its devices are GPUs (`OFFLOAD_BACKEND=host` skips those).
    pub gpu: bool,
}

/// Every plugin, in the order their devices are listed: GPUs first, the host CPU last. A new
/// plugin is one more entry. CUDA comes before liboffload: its driver context is then set up
/// before liboffload's CUDA plugin shares it.
pub const PLUGINS: &[Plugin] = &[
    Plugin {
        name: "CUDA",
        discover: cuda::discover,
        gpu: true,
    },
    Plugin {
        name: "liboffload",
        discover: liboffload::discover,
        gpu: true,
    },
    Plugin {
        name: "OpenCL",
        discover: opencl::discover,
        gpu: true,
    },
    Plugin {
        name: "host",
        discover: host::discover,
        gpu: false,
    },
];

/// Devices of plugins.
type Handles = Vec<Arc<dyn Backend>>;

/// What discovery found.
pub(crate) struct Discovered {
    /// Each device once, a GPU through its preferred plugin, in plugin order.
    pub listed: Handles,
    /// The other plugins' handles of listed GPUs.
    pub alternates: Handles,
    /// For each GPU plugin that found no device, why.
    pub reasons: Vec<String>,
}

/// The devices of every plugin (GPU plugins only when `gpus`), each physical GPU listed once:
/// through `prefer` where that plugin drives it, else NVIDIA GPUs through the CUDA plugin and
/// the others through liboffload.
pub(crate) fn discover_all(gpus: bool, prefer: Option<BackendKind>) -> Discovered {
    let mut found = Vec::new();
    let mut reasons = Vec::new();
    for plugin in PLUGINS.iter().filter(|p| gpus || !p.gpu) {
        match (plugin.discover)() {
            Ok(devices) if !devices.is_empty() => found.extend(devices),
            Ok(_) => reasons.push(format!("{}: the driver reports no device", plugin.name)),
            Err(reason) => reasons.push(format!("{}: {reason}", plugin.name)),
        }
    }
    let (listed, alternates) = one_handle_per_gpu(found, prefer);
    Discovered {
        listed,
        alternates,
        reasons,
    }
}

/// Splits the handles of every plugin into one per physical device (the preferred plugin's) and
/// the rest. Two handles are one GPU when their UUIDs agree, or, where a plugin cannot tell its
/// UUID, when both are NVIDIA GPUs of the same ordinal (liboffload numbers CUDA GPUs as the
/// driver does).
fn one_handle_per_gpu(found: Handles, prefer: Option<BackendKind>) -> (Handles, Handles) {
    let preferred = |b: &Arc<dyn Backend>| match (prefer, b.platform()) {
        (Some(kind), _) if kind == b.kind() => true,
        (_, Platform::Cuda) => {
            b.kind() == BackendKind::Cuda && prefer.is_none_or(|k| k == BackendKind::Cuda)
        }
        _ => b.kind() == BackendKind::LibOffload,
    };
    let same_gpu = |a: &Arc<dyn Backend>, b: &Arc<dyn Backend>| {
        a.platform() != Platform::Host
            && match (a.uuid(), b.uuid()) {
                (Some(x), Some(y)) => x == y,
                _ => {
                    a.platform() == Platform::Cuda
                        && b.platform() == Platform::Cuda
                        && a.ordinal() == b.ordinal()
                }
            }
    };
    let mut listed: Handles = Vec::new();
    let mut alternates = Vec::new();
    for device in found {
        match listed
            .iter()
            .position(|l| l.kind() != device.kind() && same_gpu(l, &device))
        {
            Some(i) if preferred(&device) && !preferred(&listed[i]) => {
                alternates.push(std::mem::replace(&mut listed[i], device));
            }
            Some(_) => alternates.push(device),
            None => listed.push(device),
        }
    }
    (listed, alternates)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::mock::MockGpu;

    fn gpu(
        kind: BackendKind,
        platform: Platform,
        ordinal: usize,
        uuid: Option<u8>,
    ) -> Arc<dyn Backend> {
        let mut mock = MockGpu::new(1 << 20);
        mock.identity = (kind, platform, ordinal, uuid.map(|u| [u; 16]));
        Arc::new(mock)
    }

    /// A handle's plugin and ordinal.
    type Id = (BackendKind, usize);

    fn split(found: Handles, prefer: Option<BackendKind>) -> (Vec<Id>, Vec<Id>) {
        let ids = |h: Handles| h.iter().map(|b| (b.kind(), b.ordinal())).collect();
        let (listed, alternates) = one_handle_per_gpu(found, prefer);
        (ids(listed), ids(alternates))
    }

    /// Two NVIDIA GPUs seen by both plugins (one matched by UUID, one by ordinal where
    /// liboffload could not tell the UUID) and an AMD GPU only liboffload drives.
    fn machine() -> Handles {
        use BackendKind::{Cuda, LibOffload};
        vec![
            gpu(Cuda, Platform::Cuda, 0, Some(1)),
            gpu(Cuda, Platform::Cuda, 1, Some(2)),
            gpu(LibOffload, Platform::Cuda, 0, Some(1)),
            gpu(LibOffload, Platform::Cuda, 1, None),
            gpu(LibOffload, Platform::Amdgpu, 0, Some(3)),
        ]
    }

    #[test]
    fn each_gpu_is_listed_once_through_its_preferred_plugin() {
        use BackendKind::{Cuda, LibOffload};
        let (listed, alternates) = split(machine(), None);
        assert_eq!(listed, [(Cuda, 0), (Cuda, 1), (LibOffload, 0)]);
        assert_eq!(alternates, [(LibOffload, 0), (LibOffload, 1)]);
        let (listed, alternates) = split(machine(), Some(LibOffload));
        assert_eq!(listed, [(LibOffload, 0), (LibOffload, 1), (LibOffload, 0)]);
        assert_eq!(alternates, [(Cuda, 0), (Cuda, 1)]);
        assert_eq!(split(machine(), Some(Cuda)), split(machine(), None));
    }

    #[test]
    fn different_uuids_are_different_gpus_whatever_their_ordinals() {
        use BackendKind::{Cuda, LibOffload};
        let found = vec![
            gpu(Cuda, Platform::Cuda, 0, Some(1)),
            gpu(LibOffload, Platform::Cuda, 0, Some(2)),
        ];
        let (listed, alternates) = split(found, None);
        assert_eq!(listed, [(Cuda, 0), (LibOffload, 0)]);
        assert!(alternates.is_empty());
    }
}
