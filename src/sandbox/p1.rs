//! Core WASI preview-1 modules become components with the preview-1
//! adapter, so they run through the same sandbox as every component.

use wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_COMMAND_ADAPTER;

/// Wraps a preview-1 command module into a `wasi:cli/command` component.
pub fn componentize(module: &[u8]) -> anyhow::Result<Vec<u8>> {
    wit_component::ComponentEncoder::default()
        .module(module)?
        .adapter(
            "wasi_snapshot_preview1",
            WASI_SNAPSHOT_PREVIEW1_COMMAND_ADAPTER,
        )?
        .validate(true)
        .encode()
}
