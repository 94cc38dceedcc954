public import Dispatch

/// Where callbacks and listeners are delivered.
///
/// The seeds deliver on the main thread. On Linux the UI loop may be GLib's rather than Dispatch's,
/// so an app can pass its own: for GTK, a closure that posts with `g_idle_add`.
///
///     let executor = CallbackExecutor.custom { work in postToGLibMainLoop(work) }
public struct CallbackExecutor: Sendable {
    private let post: @Sendable (@escaping @Sendable () -> Void) -> Void
    /// What the audit journal calls it: `main`, `queue <label>` or `custom`.
    public let name: String

    /// Delivers with `post`.
    public static func custom(_ post: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void) -> CallbackExecutor {
        CallbackExecutor(post: post, name: "custom")
    }

    /// `DispatchQueue.main` (the default). The main queue must be serviced (an app's run loop,
    /// `dispatchMain()`), or nothing is delivered.
    public static var main: CallbackExecutor { CallbackExecutor(post: { work in DispatchQueue.main.async(execute: work) }, name: "main") }

    /// A dispatch queue of the app's choosing.
    public static func queue(_ queue: DispatchQueue) -> CallbackExecutor {
        CallbackExecutor(post: { work in queue.async(execute: work) }, name: "queue \(queue.label)")
    }

    /// Runs `work` later through this executor.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        post(work)
    }
}
