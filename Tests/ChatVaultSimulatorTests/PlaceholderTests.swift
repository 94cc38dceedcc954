import XCTest
@testable import ChatVaultSimulator

final class PlaceholderTests: XCTestCase {}
