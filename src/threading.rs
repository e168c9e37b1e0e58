//! What the crate promises about threads, checked at compile time: every public handle, layer,
//! view and result can be sent to and shared between threads (the lib docs, "Threads").

#[allow(dead_code)]
const fn send_sync<T: Send + Sync>() {}

const _: () = {
    send_sync::<crate::FusedGemm>();
    send_sync::<crate::Linear>();
    send_sync::<crate::PreparedWeight>();
    send_sync::<crate::Plan>();
    send_sync::<crate::MatrixRef<'static>>();
    send_sync::<crate::MatrixMut<'static>>();
    send_sync::<crate::Error>();
    send_sync::<crate::DeviceInfo>();
    #[cfg(feature = "candle")]
    send_sync::<crate::candle::FusedLinear>();
};
