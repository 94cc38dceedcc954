public import CChatVault
import ChatVault
import ChatVaultSimulator

// Groups and threads on the simulated server, so a C app can test its group and thread views.

@c(cv_simulator_add_group)
public func cvSimulatorAddGroup(_ simulator: OpaquePointer?, _ guid: UnsafePointer<CChar>?, _ name: UnsafePointer<CChar>?,
                                _ owner: UnsafePointer<CChar>?, _ out: ErrorOut) -> Bool {
    guard let box = simulators.get(simulator) else { CError.invalid(out, "not a simulator handle"); return false }
    guard let guid = text(guid), !guid.isEmpty, let name = text(name) else { CError.invalid(out, "guid and name must be UTF-8 strings"); return false }
    let ownerUid: String?
    if let owner {
        guard let o = text(owner), !o.isEmpty else { CError.invalid(out, "owner must be a UTF-8 string or NULL"); return false }
        ownerUid = o
    } else {
        ownerUid = nil
    }
    return simulated(out) {
        try box.simulator.addGroup(guid, name: name, owner: ownerUid)
    }
}

@c(cv_simulator_add_member)
public func cvSimulatorAddMember(_ simulator: OpaquePointer?, _ guid: UnsafePointer<CChar>?, _ uid: UnsafePointer<CChar>?,
                                 _ out: ErrorOut) -> Bool {
    guard let box = simulators.get(simulator) else { CError.invalid(out, "not a simulator handle"); return false }
    guard let guid = text(guid), !guid.isEmpty, let uid = text(uid), !uid.isEmpty else {
        CError.invalid(out, "guid and uid must be UTF-8 strings")
        return false
    }
    return simulated(out) {
        try box.simulator.addMembers([uid], to: guid)
    }
}

@c(cv_simulator_post_reply)
public func cvSimulatorPostReply(_ simulator: OpaquePointer?, _ from: UnsafePointer<CChar>?, _ receiverType: cv_receiver_type,
                                 _ receiver: UnsafePointer<CChar>?, _ parentId: Int64, _ body: UnsafePointer<CChar>?,
                                 _ idOut: UnsafeMutablePointer<Int64>?, _ out: ErrorOut) -> Bool {
    guard parentId > 0 else {
        // Checked after the handle, as every call does.
        CError.invalid(out, simulators.get(simulator) == nil ? "not a simulator handle" : "parent_id must be a server id (> 0)")
        return false
    }
    return postText(simulator, from, receiverType, receiver, body, parentId: Int(parentId), idOut, out)
}
