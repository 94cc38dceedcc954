/// The media cache's public surface. For now the mode in effect; downloads, cached paths and the
/// media listener come with the media engine (issue 9).
extension OfflineVault {
    /// The receive-side media mode in effect: the configured `mediaCaching` while offline support
    /// is active for the logged-in user, `.off` otherwise (before login, after logout, while the
    /// cache cannot open, with offline support disabled), so a UI can rely on it alone.
    public func getMediaCachingMode() -> MediaCachingMode {
        isOfflineEnabled() ? config.mediaCaching : .off
    }
}

extension CometChat {
    /// The media mode in effect on the shared vault (`.off` without one).
    public static func getMediaCachingMode() -> CometChat.MediaCachingMode {
        offlineVault?.getMediaCachingMode() ?? .off
    }
}
