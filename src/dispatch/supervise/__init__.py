"""The supervisor: fold (history -> view), next (view + policy -> decision), and the loop."""
