"""Model management: picker, Models dialog (library, discover, downloads), defaults."""
