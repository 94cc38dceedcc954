public enum ChatVaultSimulatorPlaceholder {}
