/// D-Bus session configurations for private buses.
public enum PrivateBus {
    /// A session bus configuration listening on `listen` (e.g. `unix:dir=/tmp/x`,
    /// `unix:path=/tmp/x/bus`). Without `serviceDirectory` nothing can be activated: in particular
    /// no Secret Service (the stock session configuration would start gnome-keyring through
    /// /usr/share/dbus-1/services/org.freedesktop.secrets.service).
    public static func configuration(listen: String, serviceDirectory: String? = nil) -> String {
        """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <listen>\(listen)</listen>
          <auth>EXTERNAL</auth>
          \(serviceDirectory.map { "<servicedir>\($0)</servicedir>" } ?? "")
          <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
        </busconfig>
        """
    }
}
